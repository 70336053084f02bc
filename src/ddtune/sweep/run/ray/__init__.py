"""sweep.run.ray"""
