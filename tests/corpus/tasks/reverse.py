def reverse_in_place(xs: list[int]) -> list[int]:
    i, j = 0, len(xs) - 1
    while i < j:
        xs[i], xs[j] = xs[j], xs[i]
        i += 1
        j -= 1
    return xs

def reversed_copy(xs: list[int]) -> list[int]:
    out = []
    for i in range(len(xs) - 1, -1, -1):
        out.append(xs[i])
    return out

def palindrome(xs: list[int]) -> bool:
    for i in range(len(xs) // 2):
        if xs[i] != xs[-1 - i]:
            return False
    return True

# call: reverse_in_place([1, 2, 3, 4]) -> [4, 3, 2, 1]
# call: reverse_in_place([1, 2, 3]) -> [3, 2, 1]
# call: reverse_in_place([]) -> []
# call: reversed_copy([5, 6]) -> [6, 5]
# call: palindrome([1, 2, 1]) -> True
# call: palindrome([1, 2]) -> False
