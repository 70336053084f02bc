"""sweep.plan"""
