"""Rewrite a CUDA source into C++ that g++ compiles against the usbeam CUDA emulator.

Only the two constructs a host compiler cannot parse are rewritten; everything else is the
CUDA source unchanged (the emulator header supplies the CUDA keywords, built-ins and
intrinsics):

  kernel<T, B><<<grid, block, shared, stream>>>(args)
      -> ::usbeam_emu::Launch(grid, block, shared, stream, "kernel", __FILE__, __LINE__
                              [, max threads from the kernel's __launch_bounds__]).with(kernel<T, B>)(args)
  extern __shared__ [__align__(n)] T name[];
      -> T *const name = (T *)::usbeam_emu::dynamic_shared();

and, for the stress mode (USBEAM_EMU_STRESS=1, cuda/emu/MODES.md), switch points in the bodies
of __global__ and __device__ functions: ` USBEAM_EMU_POINT();` after every statement, and the
same call at every loop back-edge (`for (a; b; USBEAM_EMU_POINT(), c)`, `while (USBEAM_EMU_POINT(), c)`).
A point costs one test of a flag unless the stress mode is on, when the running GPU thread may
hand over to another thread of its block there.  Points are placed from tokens (comments,
strings and preprocessor lines skipped), never where they would change the meaning: not
before an `else` or the `while` of a do-while, not in struct/class/union/enum bodies, not in
constexpr functions.  Code in headers and in macros gets none (a macro's own statements; the
statement a macro call is part of gets one after it).

Line numbers are kept (no line is added or removed) so compiler messages and stack traces
point at the CUDA source.  Usage: python translate.py in.cu out.cpp
"""
import re
import sys

_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\(\s*([^,()]+?)\s*(?:,[^()]*)?\)\s*([A-Za-z_]\w*)\s*\(")
_DYNAMIC_SHARED = re.compile(
    r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?([A-Za-z_][\w\s]*?)\s+([A-Za-z_]\w*)\s*\[\s*\]\s*;")


def _kernel_start(text, end):
    """Index where the kernel expression that ends just before `end` begins: an identifier,
    optionally qualified (a::b) and followed by balanced template arguments."""
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    if text[i - 1] == ">":
        depth = 0
        while i > 0:
            i -= 1
            if text[i] == ">":
                depth += 1
            elif text[i] == "<":
                depth -= 1
                if depth == 0:
                    break
        if depth != 0:
            raise ValueError("unbalanced template arguments before <<<")
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_:"):
        i -= 1
    return i


def _split_top_level(config):
    parts, depth, current = [], 0, []
    for ch in config:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts]


_POINT = "USBEAM_EMU_POINT()"
_TOKEN = re.compile(r"""
    (?P<pre>^[ \t]*\#(?:\\\n|[^\n])*)
  | (?P<skip>//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|[ \t\r\f\v]+|\n)
  | (?P<word>[A-Za-z_]\w*)
  | (?P<number>\.?\d(?:[\w.]|[eEpP][+-])*)
  | (?P<punct>.)""", re.VERBOSE | re.MULTILINE | re.DOTALL)
_TYPE_KEYWORDS = {"struct", "class", "union", "enum"}


def _tokens(text):
    """(text, start, end) of the significant tokens: no comments, literals or preprocessor lines."""
    return [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)
            if m.lastgroup in ("word", "number", "punct")]


def _matching(tokens, i, open_, close):
    """Index of the token closing the bracket opened at tokens[i]."""
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j][0] == open_:
            depth += 1
        elif tokens[j][0] == close:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unbalanced {open_!r} at offset {tokens[i][1]}")


def _body_points(tokens, first, last, inserts):
    """Switch points in the function body tokens[first] ('{') .. tokens[last] ('}')."""
    # Per open brace: is it a block of statements, and the parenthesis depth inside it (a
    # ';' at depth 0 ends a statement; one inside a for header or call does not).
    stack = []
    for k in range(first, last + 1):
        tok, start, end = tokens[k]
        if tok == "{":
            back = k - 1
            while back > first and tokens[back][0] not in (";", "{", "}"):
                if tokens[back][0] in _TYPE_KEYWORDS:
                    break
                back -= 1
            stack.append([tokens[back][0] not in _TYPE_KEYWORDS, 0])
        elif tok == "}":
            stack.pop()
        elif tok == "(":
            stack[-1][1] += 1
        elif tok == ")":
            stack[-1][1] -= 1
        elif tok == ";" and stack[-1][0] and stack[-1][1] == 0:
            following = tokens[k + 1][0] if k + 1 <= last else ""
            if following == "while":  # the while of `do statement; while (c);`?
                back = k - 1
                while tokens[back][0] not in (";", "{", "}") and tokens[back][0] != "do":
                    back -= 1
                following = "do-while" if tokens[back][0] == "do" else ""
            if following not in ("else", "do-while"):
                inserts.append((end, f" {_POINT};"))
        elif tok in ("for", "while") and k + 1 <= last and tokens[k + 1][0] == "(":
            close = _matching(tokens, k + 1, "(", ")")
            if tok == "while":
                inserts.append((tokens[k + 1][2], f"{_POINT}, "))
                continue
            depth, semicolons = 0, []
            for j in range(k + 1, close):
                depth += {"(": 1, ")": -1}.get(tokens[j][0], 0)
                if tokens[j][0] == ";" and depth == 1:
                    semicolons.append(j)
            if len(semicolons) == 2:  # not a range-for
                empty = semicolons[1] + 1 == close
                inserts.append((tokens[semicolons[1]][2], f" {_POINT}" if empty else f" {_POINT},"))


def stress_points(text):
    """The text with switch points in every __global__ / __device__ function body."""
    tokens = _tokens(text)
    inserts = []
    k = 0
    while k < len(tokens):
        if tokens[k][0] not in ("__global__", "__device__"):
            k += 1
            continue
        # the declaration runs to its body ('{'), or ends (';') or is a variable ('=')
        j, depth, constexpr = k, 0, False
        while j < len(tokens):
            tok = tokens[j][0]
            depth += {"(": 1, ")": -1}.get(tok, 0)
            constexpr = constexpr or tok == "constexpr"
            if depth == 0 and tok in ("{", ";", "="):
                break
            j += 1
        if j == len(tokens) or tokens[j][0] != "{":
            k = j + 1
            continue
        close = _matching(tokens, j, "{", "}")
        if not constexpr and not any(t[0] == "constexpr" for t in tokens[max(0, k - 4):k]):
            _body_points(tokens, j, close, inserts)
        k = close + 1
    for pos, insert in sorted(inserts, reverse=True):
        text = text[:pos] + insert + text[pos:]
    return text


def translate(text):
    text = stress_points(text)
    # A launch with more threads than the kernel's __launch_bounds__ fails on a GPU: the
    # launch passes the bound (an expression visible at the launch site) to the emulator.
    bounds = {m.group(2): m.group(1) for m in _LAUNCH_BOUNDS.finditer(text)}
    text = _DYNAMIC_SHARED.sub(lambda m: f"{m.group(1)} *const {m.group(2)} = "
                               f"({m.group(1)} *)::usbeam_emu::dynamic_shared();", text)
    out, pos = [], 0
    while True:
        start = text.find("<<<", pos)
        if start < 0:
            out.append(text[pos:])
            return "".join(out)
        close = text.find(">>>", start)
        if close < 0:
            raise ValueError("<<< without >>>")
        k0 = _kernel_start(text, start)
        kernel = text[k0:start].strip()
        config = _split_top_level(text[start + 3:close])
        if not 2 <= len(config) <= 4:
            raise ValueError(f"launch configuration of {kernel}: {config}")
        config += ["0"] * (4 - len(config))
        name = kernel.split("<")[0]
        # Keep the newlines of a multi-line configuration so line numbers stay put.
        newlines = "\n" * text[start:close].count("\n")
        out.append(text[pos:k0])
        bound = f", (int)({bounds[name]})" if name in bounds else ""
        out.append(f"::usbeam_emu::Launch({', '.join(config)}, \"{name}\", __FILE__, __LINE__{bound})"
                   f".with({kernel}){newlines}")
        pos = close + 3


if __name__ == "__main__":
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        text = f.read()
    with open(dst, "w") as f:
        f.write(f'#line 1 "{src}"\n' + translate(text))
