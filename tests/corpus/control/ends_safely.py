# A body ends safely with a return, an if/else whose branches all do, or 'while True:'
# without a break of its own.
def all_branches(x: int) -> int:
    if x > 0:
        return 1
    elif x < 0:
        if x < -10:
            return -2
        else:
            return -1
    else:
        return 0

def forever(x: int) -> int:
    while True:
        for i in range(3):
            if i == 2:
                break
        x += 1
        if x > 5:
            return x

def loop_then_return(xs: list[int]) -> bool:
    for x in xs:
        if x < 0:
            return True
    return False

# call: all_branches(3) -> 1
# call: all_branches(-3) -> -1
# call: all_branches(-30) -> -2
# call: all_branches(0) -> 0
# call: forever(0) -> 6
# call: forever(100) -> 101
# call: loop_then_return([1, -1]) -> True
# call: loop_then_return([]) -> False
