"""A string literal alone on its line does nothing (a docstring): at the top of the file, of a
function or of any block, between functions, and as a one-line body. Adjacent literals join."""

def scale(x: int) -> int:
    '''Triple quotes span lines;
    escapes \''' and "quotes" stay inside.'''
    "two" 'parts' r"raw\d"
    return x * 3

"between functions"

def clamp(x: int) -> int:
    r"""Raw and prefixed forms."""
    if x < 0: "negative"
    if x > 9:
        u"too big"
        return 9
    return x

# call: scale(4) -> 12
# call: clamp(-2) -> -2
# call: clamp(12) -> 9
