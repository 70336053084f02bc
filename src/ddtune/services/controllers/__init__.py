"""services.controllers"""
