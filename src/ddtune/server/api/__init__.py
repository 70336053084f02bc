"""server.api"""
