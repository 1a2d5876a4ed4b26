def eq(a: int, b: int) -> bool:
    return a == b

def ne(a: int, b: int) -> bool:
    return a != b

def eq_bool(a: bool, b: bool) -> bool:
    return a == b

def ne_bool(a: bool, b: bool) -> bool:
    return a != b

def eq_results(a: int) -> bool:
    return (a > 0) == (a > 10)

# call: eq(3, 3) -> True
# call: eq(3, -3) -> False
# call: ne(3, -3) -> True
# call: ne(-2147483648, -2147483648) -> False
# call: eq_bool(True, True) -> True
# call: eq_bool(False, True) -> False
# call: ne_bool(False, True) -> True
# call: eq_results(5) -> False
# call: eq_results(50) -> True
# call: eq_results(-5) -> True
