"""sweep.run"""
