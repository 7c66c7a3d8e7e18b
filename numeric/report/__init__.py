"""numeric/report"""
