"""numeric/engine"""
