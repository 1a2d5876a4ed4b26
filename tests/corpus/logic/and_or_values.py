# 'and' and 'or' return one of their operands, not a bool.
def and_(a: int, b: int) -> int:
    return a and b

def or_(a: int, b: int) -> int:
    return a or b

def default(x: int) -> int:
    return x or 42

def chain(a: int, b: int, c: int) -> int:
    return a and b or c

def bools(a: bool, b: bool) -> bool:
    return a and b or not a

# call: and_(3, 4) -> 4
# call: and_(0, 4) -> 0
# call: and_(3, 0) -> 0
# call: and_(-1, -2) -> -2
# call: or_(3, 4) -> 3
# call: or_(0, 4) -> 4
# call: or_(0, 0) -> 0
# call: default(0) -> 42
# call: default(-7) -> -7
# call: chain(1, 2, 3) -> 2
# call: chain(0, 2, 3) -> 3
# call: chain(1, 0, 3) -> 3
# call: bools(True, False) -> False
# call: bools(False, False) -> True
# call: bools(True, True) -> True
