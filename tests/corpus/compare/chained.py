def between(lo: int, x: int, hi: int) -> bool:
    return lo <= x < hi

def ascending(a: int, b: int, c: int, d: int) -> bool:
    return a < b < c < d

def mixed(a: int, b: int, c: int) -> bool:
    return a == b != c

def weird(a: int, b: int, c: int) -> bool:
    return a < b > c

# call: between(0, 0, 10) -> True
# call: between(0, 10, 10) -> False
# call: between(0, -1, 10) -> False
# call: ascending(1, 2, 3, 4) -> True
# call: ascending(1, 2, 2, 4) -> False
# call: ascending(4, 3, 5, 6) -> False
# call: mixed(1, 1, 2) -> True
# call: mixed(1, 1, 1) -> False
# call: weird(1, 5, 2) -> True
# call: weird(1, 5, 7) -> False
