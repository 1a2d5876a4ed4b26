def sum_to(n: int) -> int:
    s = 0
    i = 1
    while i <= n:
        s += i
        i += 1
    return s

def first_multiple(k: int, start: int) -> int:
    x = start
    while True:
        if x % k == 0:
            return x
        x += 1

def skip_odds(n: int) -> int:
    s = 0
    i = 0
    while i < n:
        i += 1
        if i % 2 == 1:
            continue
        s += i
    return s

def break_at(n: int, stop: int) -> int:
    i = 0
    while i < n:
        if i == stop:
            break
        i += 1
    return i

# call: sum_to(100) -> 5050
# call: sum_to(0) -> 0
# call: first_multiple(7, 50) -> 56
# call: first_multiple(-3, -7) -> -6
# call: skip_odds(10) -> 30
# call: break_at(10, 4) -> 4
# call: break_at(3, 4) -> 3
