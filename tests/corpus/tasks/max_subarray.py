def max_subarray(xs: list[int]) -> int:
    best = xs[0]
    cur = 0
    for x in xs:
        cur = max(cur + x, x)
        best = max(best, cur)
    return best

def digit_sum(n: int) -> int:
    n = abs(n)
    s = 0
    while n > 0:
        s += n % 10
        n //= 10
    return s

def merge(a: list[int], b: list[int]) -> list[int]:
    out = []
    i, j = 0, 0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    while i < len(a):
        out.append(a[i])
        i += 1
    while j < len(b):
        out.append(b[j])
        j += 1
    return out

# call: max_subarray([-2, 1, -3, 4, -1, 2, 1, -5, 4]) -> 6
# call: max_subarray([-3, -1, -2]) -> -1
# call: max_subarray([]) -> trap index_error
# call: digit_sum(-2147483647) -> 46
# call: merge([1, 4, 9], [2, 3, 10, 11]) -> [1, 2, 3, 4, 9, 10, 11]
