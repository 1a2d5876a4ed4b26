def collect1(n: int) -> list[int]:
    out = []
    for i in range(n):
        out.append(i)
    return out

def collect2(a: int, b: int) -> list[int]:
    out = []
    for i in range(a, b):
        out.append(i)
    return out

def collect3(a: int, b: int, s: int) -> list[int]:
    out = []
    for i in range(a, b, s):
        out.append(i)
    return out

# call: collect1(4) -> [0, 1, 2, 3]
# call: collect1(0) -> []
# call: collect1(-3) -> []
# call: collect2(-2, 2) -> [-2, -1, 0, 1]
# call: collect2(5, 2) -> []
# call: collect3(0, 10, 3) -> [0, 3, 6, 9]
# call: collect3(10, 0, -3) -> [10, 7, 4, 1]
# call: collect3(5, -5, -5) -> [5, 0]
# call: collect3(0, 10, -1) -> []
# call: collect3(0, 1, 1000) -> [0]
# call: collect3(2147483640, 2147483647, 3) -> [2147483640, 2147483643, 2147483646]
# call: collect3(-2147483640, -2147483648, -4) -> [-2147483640, -2147483644]
