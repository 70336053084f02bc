"""sweep.spec"""
