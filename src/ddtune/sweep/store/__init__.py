"""sweep.store"""
