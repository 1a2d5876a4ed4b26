def ack(m: int, n: int) -> int:
    if m == 0:
        return n + 1
    if n == 0:
        return ack(m - 1, 1)
    return ack(m - 1, ack(m, n - 1))

# call: ack(0, 0) -> 1
# call: ack(1, 2) -> 4
# call: ack(2, 3) -> 9
# call: ack(3, 3) -> 61
