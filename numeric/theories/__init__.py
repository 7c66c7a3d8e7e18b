"""numeric/theories"""
