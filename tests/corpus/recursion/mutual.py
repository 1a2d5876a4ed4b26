def is_even(n: int) -> bool:
    if n == 0:
        return True
    return is_odd(n - 1)

def is_odd(n: int) -> bool:
    if n == 0:
        return False
    return is_even(n - 1)

# call: is_even(10) -> True
# call: is_even(7) -> False
# call: is_odd(7) -> True
# call: is_odd(0) -> False
