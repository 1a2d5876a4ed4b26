def empty() -> list[int]:
    return []

def exprs(a: int) -> list[int]:
    return [a, a + 1, -a, a * a, abs(a), len([a, a])]

def trailing() -> list[int]:
    return [1, 2, 3,]

def multiline() -> list[int]:
    return [
        1,
        2,   # a comment inside brackets
            3,
    ]

def extremes() -> list[int]:
    return [2147483647, -2147483647 - 1, 0]

# call: empty() -> []
# call: exprs(-3) -> [-3, -2, 3, 9, 3, 2]
# call: trailing() -> [1, 2, 3]
# call: multiline() -> [1, 2, 3]
# call: extremes() -> [2147483647, -2147483648, 0]
