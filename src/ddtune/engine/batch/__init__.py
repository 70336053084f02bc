"""engine.batch"""
