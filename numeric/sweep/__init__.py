"""numeric/sweep"""
