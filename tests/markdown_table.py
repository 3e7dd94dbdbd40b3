"""Reading a report's markdown tables back in tests."""


def table(text: str, header: str) -> list[list[str]]:
    """The rows of the markdown table whose header starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header}"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows
