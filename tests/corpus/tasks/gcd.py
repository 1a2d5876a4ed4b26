def gcd(a: int, b: int) -> int:
    a = abs(a)
    b = abs(b)
    while b != 0:
        a, b = b, a % b
    return a

def lcm(a: int, b: int) -> int:
    return a // gcd(a, b) * b

# call: gcd(12, 18) -> 6
# call: gcd(17, 5) -> 1
# call: gcd(0, 7) -> 7
# call: gcd(-12, 18) -> 6
# call: gcd(0, 0) -> 0
# call: gcd(2147483647, 2147483646) -> 1
# call: lcm(4, 6) -> 12
# call: lcm(0, 0) -> trap zero_division
# call: lcm(0, 3) -> 0
