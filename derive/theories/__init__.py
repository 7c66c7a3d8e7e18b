"""derive/theories"""
