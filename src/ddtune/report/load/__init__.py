"""report.load"""
