# Functions may call functions defined later in the file.
def main(x: int) -> int:
    return double(inc(x))

def inc(x: int) -> int:
    return x + 1

def double(x: int) -> int:
    return x * 2

# call: main(4) -> 10
# call: inc(-1) -> 0
