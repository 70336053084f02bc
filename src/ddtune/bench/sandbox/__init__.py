"""bench.sandbox"""
