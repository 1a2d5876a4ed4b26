def classify(x: int) -> int:
    if x < 0:
        return -1
    elif x == 0:
        return 0
    elif x < 10:
        return 1
    else:
        return 2

def no_else(x: int) -> int:
    r = 5
    if x > 3:
        r = 6
    elif x > 1:
        r = 7
    return r

def nested(a: int, b: int) -> int:
    if a > 0:
        if b > 0:
            return 1
        else:
            return 2
    else:
        if b > 0:
            return 3
        return 4

# call: classify(-9) -> -1
# call: classify(0) -> 0
# call: classify(9) -> 1
# call: classify(10) -> 2
# call: no_else(4) -> 6
# call: no_else(2) -> 7
# call: no_else(0) -> 5
# call: nested(1, 1) -> 1
# call: nested(1, 0) -> 2
# call: nested(0, 1) -> 3
# call: nested(0, 0) -> 4
