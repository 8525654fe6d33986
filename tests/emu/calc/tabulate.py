# Stand-in for the tabulate package, which only formats tables: with headers="firstrow"
# (the one way matrix_calculator.py calls it) every row is printed comma-separated.
def tabulate(rows, headers=(), **kw):
    return "\n".join(",".join(str(c) for c in r) for r in rows)
