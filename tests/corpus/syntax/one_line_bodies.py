def absval(x: int) -> int:
    if x < 0: return -x
    return x

def count(n: int) -> int:
    c = 0
    while c < n: c += 1
    for i in range(3): c += i
    return c

def pick(x: int) -> int:
    if x > 0: return 1
    elif x < 0: return -1
    else: return 0

def one_liner(x: int) -> int: return x * 2

# call: absval(-4) -> 4
# call: count(5) -> 8
# call: pick(-9) -> -1
# call: pick(0) -> 0
# call: one_liner(21) -> 42
