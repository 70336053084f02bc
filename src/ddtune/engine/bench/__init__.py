"""engine.bench"""
