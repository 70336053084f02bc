"""bench.load"""
