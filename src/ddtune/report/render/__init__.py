"""report.render"""
