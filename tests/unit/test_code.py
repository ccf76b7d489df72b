"""Source code as documents: definitions found in the common languages' spellings, prose in
comments not taken for one, and a real file chunked at its definitions with the lines of the
file itself (the bundled tokenizer, the real chunker and converter)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from libs.errors import ConversionError, NoTextError
from services.converter.archive import ArchiveLimits
from services.converter.chunk import Chunker
from services.converter.code import DefinitionScanner
from services.converter.convert import DocumentConverter

REPO = Path(__file__).resolve().parents[2]

SAMPLES = {
    "python": (
        "import os\n\nclass Chunker:\n    \"\"\"A class of things: type annotations are\n"
        "    module containing:\"\"\"\n\n    def __init__(self, tokenizer):\n        pass\n\n"
        "    @classmethod\n    def bundled(cls, size: int,\n                overlap: int):\n"
        "        return cls()\n\nasync def main():\n    pass\n",
        [(3, 1, "class Chunker"), (7, 2, "def __init__(self, tokenizer)"),
         (11, 2, "def bundled(cls, size: int,"), (15, 1, "async def main()")],
    ),
    "typescript": (
        "export interface Options {\n  a: number;\n}\nexport type Mode = \"a\" | \"b\";\n"
        "export const handler = async (req: Request): Promise<Response> => {\n};\n"
        "export default class Server<T> extends Base {\n  private count = 0;\n"
        "  public async handle(req: Request): Promise<void> {\n  }\n}\n",
        [(1, 1, "export interface Options"), (4, 1, ""),  # `type Mode` ends the interface
         (5, 1, "export const handler = async (req: Request): Promise<Response> =>"),
         (7, 1, "export default class Server<T> extends Base"),
         (9, 2, "public async handle(req: Request): Promise<void>")],
    ),
    "go": (
        "package main\n\ntype Server struct {\n}\n\n"
        "func (s *Server) Start(ctx context.Context) error {\n\treturn nil\n}\n",
        [(3, 1, "type Server struct"), (6, 1, "func (s *Server) Start(ctx context.Context) error")],
    ),
    "rust": (
        "pub struct Store {\n}\nimpl Store {\n    pub fn open(path: &str) -> Result<Self> {\n"
        "    }\n}\n",
        [(1, 1, "pub struct Store"), (3, 1, "impl Store"),
         (4, 2, "pub fn open(path: &str) -> Result<Self>")],
    ),
    "java": (
        "public class App {\n    public static void main(String[] args) {\n    }\n"
        "    private int count = 0;\n}\n",
        [(1, 1, "public class App"), (2, 2, "public static void main(String[] args)"),
         (4, 2, "")],  # a field after the method is in the class, not in main
    ),
    "c": (
        "#include <stdio.h>\n\nstatic int count = 0;\nint add(int a, int b);\n\n"
        "static inline unsigned long *make_table(size_t n)\n{\n    if (n == 0) {\n"
        "        return NULL;\n    }\n    for (int i = 0; i < n; i++) {\n    }\n"
        "    printf(\"%d\\n\", add(1, 2));\n}\n\nint main(int argc, char **argv) {\n"
        "    while (argc) {\n    }\n    return make_table(3) != 0;\n}\n",
        [(6, 1, "static inline unsigned long *make_table(size_t n)"),
         (16, 1, "int main(int argc, char **argv)")],
    ),
    "cpp": (
        "namespace store {\nstd::vector<int> Index::search(const Query& q) const {\n"
        "    switch (q.mode) {\n    }\n}\nIndex::~Index() {\n}\n}\n",
        [(1, 1, "namespace store"), (2, 1, "std::vector<int> Index::search(const Query& q) const"),
         (6, 1, "")],
    ),
    "javascript": (
        "class Library {\n  constructor(url) {\n    this.url = url;\n  }\n\n"
        "  async search(query, topK = 10) {\n    if (!query) {\n      throw new Error();\n"
        "    }\n    return fetch(this.url).then((r) => {\n    });\n  }\n\n"
        "  get size() {\n  }\n}\n\ndescribe('library', () => {\n  it('works', () => {\n"
        "  });\n});\nconst api = {\n  list(limit) {\n  },\n};\n",
        [(1, 1, "class Library"), (2, 2, "constructor(url)"),
         (6, 2, "async search(query, topK = 10)"), (14, 2, "get size()"),
         (18, 1, ""), (23, 1, "list(limit)")],  # a statement after the class ends it
    ),
    "kotlin": (
        "data class Point(val x: Int)\n\nfun distance(a: Point, b: Point): Double {\n}\n",
        [(1, 1, "data class Point(val x: Int)"),
         (3, 1, "fun distance(a: Point, b: Point): Double")],
    ),
    "sql": (
        "CREATE TABLE users (\n  id int\n);\ncreate or replace view v as select 1;\n",
        [(1, 1, "CREATE TABLE users ("), (4, 1, "create or replace view v as select 1;")],
    ),
}  # fmt: skip


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_definitions_and_their_nesting(language: str) -> None:
    """(line, level, text) of each definition, and (line, level, "") where a statement ends
    the definitions from that level on."""
    source, expected = SAMPLES[language]
    lines = source.split("\n")
    scanner = DefinitionScanner()
    found = [(k + 1, *h) for k in range(len(lines)) if (h := scanner.heading(lines, k))]
    assert found == expected


@pytest.mark.parametrize(
    "line",
    [
        "  enumerable: true,",  # not `enum`
        "    default:",  # not `def`
        "        model=stamp.model if stamp else None,",  # not `mod`
        "raise StoreModelMismatch(stamp.model, stamp.dim)",
        "if (count > 0) {",
        "} else if (ready) {",
        "for (int i = 0; i < n; i++) {",
        'printf("%d\\n", add(1, 2));',
        "int add(int a, int b);",  # a prototype
        "test('works', function (t) {",  # a call with a callback
        "** Returns sqlite3_realloc64()",  # a comment
        "  : __assert_fail ((expr), __FILE__)",
    ],
)
def test_statements_comments_and_prefixes_are_not_definitions(line: str) -> None:
    assert DefinitionScanner().heading([line], 0) is None


@pytest.fixture(scope="module")
def converter() -> DocumentConverter:
    return DocumentConverter(ArchiveLimits(100, 50_000_000, 2))


def test_a_source_file_is_its_own_text_chunked_at_its_definitions(
    converter: DocumentConverter,
) -> None:
    """A real file of this repository: the document is the file, its chunks' lines are the
    file's lines, and a chunk in a method has the class and the method as its headings."""
    path = REPO / "services" / "converter" / "blocks.py"
    source = path.read_text(encoding="utf-8")
    document = converter.convert(path.read_bytes(), "blocks.py")
    assert (document.markdown, document.title, document.file_type) == (
        source.rstrip(),
        "blocks.py",
        "py",
    )
    chunks = Chunker.bundled(192, 24).chunk(document.markdown, document.pages, code=True)
    lines = source.split("\n")
    for chunk in chunks:  # a chunk may start or end inside a long line, never elsewhere
        assert chunk.text.split("\n")[0].strip() in lines[chunk.start_line - 1]
        assert chunk.text.split("\n")[-1].strip() in lines[chunk.end_line - 1]
    cell = next(c for c in chunks if "def cell(self, text: str) -> None" in c.text)
    assert cell.headings[:1] == ["class Blocks"]
    assert any(h.startswith("def ") for h in cell.headings[1:]) or len(cell.headings) == 1
    # A `# comment` is not a heading in code.
    assert not any(h.startswith("#") for c in chunks for h in c.headings)


def test_binary_under_a_code_name_and_code_inside_an_archive(converter: DocumentConverter) -> None:
    with pytest.raises(
        ConversionError, match=r"binary data \(NUL bytes\), so it is not \.ts source code"
    ):
        converter.convert(b"G@\x00\x10" + bytes(200), "clip.ts")  # an MPEG transport stream
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("src/app.py", "def main():\n    pass\n")
    with pytest.raises(NoTextError, match="source code, which an archive's conversion leaves"):
        converter.convert(buffer.getvalue(), "project.zip")


def test_utf16_code_reads_and_binary_under_a_text_name_is_refused(
    converter: DocumentConverter,
) -> None:
    # Windows PowerShell ISE saves scripts as UTF-16 with a byte order mark: zero bytes that
    # are text, not binary.
    script = "function Get-Report {\n    param($Path)\n    Get-Content $Path\n}\n"
    document = converter.convert(script.encode("utf-16"), "report.ps1")
    assert document.markdown == script.rstrip()
    for name in ("notes.txt", "export.csv", "readme.md"):
        with pytest.raises(ConversionError, match=r"binary data \(NUL bytes\)"):
            converter.convert(b"MZ\x90\x00\x03\x00\x00\x00" + bytes(64) + b"This program", name)


def test_statements_after_a_definition_are_not_inside_it() -> None:
    """Module code after a function, and a field after a method, sit in the definitions
    still open, not in the one that ended."""
    body = "".join(f"    total_{i} = compute_value({i}) + offset\n" for i in range(30))
    tail = "".join(f"    run_step({i}, verbose=True)\n" for i in range(30))
    source = (
        f"def prepare(offset):\n{body}    return total_0\n\n\n"
        f'if __name__ == "__main__":\n{tail}'
        "\nclass Report:\n    def render(self):\n        return self.text\n\n"
        "    fields = ('title', 'summary', 'owner', 'created', 'updated', 'status')\n"
    )
    chunks = Chunker.bundled(64, 0).chunk(source, code=True)
    headings = {c.text.split("\n")[0].strip(): c.headings for c in chunks}
    main = next(c for c in chunks if "run_step(20" in c.text)
    assert main.headings == [], headings
    fields = next(c for c in chunks if "fields = (" in c.text)
    assert fields.headings[:1] == ["class Report"] and "def render(self)" not in fields.headings
    assert next(c for c in chunks if "total_3 " in c.text).headings == ["def prepare(offset)"]
