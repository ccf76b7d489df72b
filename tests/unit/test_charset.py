"""Legacy text encodings (`services.converter.charset`): Western European text saved by a
Windows host in its ANSI code page reads right, and text in other code pages keeps the
detector's pick; HTML and XML are read in the encoding they declare. The samples are short,
as notes and exported lists often are."""

from __future__ import annotations

import pytest

from services.converter.charset import detect_charset, read_text

WESTERN = {
    "fr": "Le garçon a mangé une crème brûlée à la fenêtre, où il était très à l'aise.\n",
    "es": "El niño comió jamón en la montaña; ¿qué más? ¡Olé!\n",
    "pt": "A informação está disponível em português; não há problema.\n",
    "sv": "Räksmörgås och smörgåsbord på Östermalm.\n",
    "en": "The naïve café owner’s résumé — “quoted” text.\n",
    "de": "Grüße aus München: Die Straße ist schön, aber die Brücke ist geschlossen.\n",
    # Lists as Excel saves them on a German Windows ("CSV (Trennzeichen-getrennt)"): the
    # detector's first pick was the DOS code page 775 ("M³ller;J÷rg").
    "de-list": "Nachname;Vorname;Ort\nMüller;Jörg;Düsseldorf\nSchäfer;Björn;Lübeck\n",
    "de-fr-list": "Name;Stadt;Betrag\nJürgen;Köln;12,50\nAnaïs;Montréal;7,25\n",
}
OTHERS = [
    ("cp1250", "Zażółć gęślą jaźń. Łódź jest piękna.\n"),
    ("cp1250", "Příliš žluťoučký kůň úpěl ďábelské ódy.\n"),
    ("cp1250", "Árvíztűrő tükörfúrógép. Ő és ű betűk.\n"),
    ("cp1251", "Привет, мир! Это проверка кодировки текста.\n"),
    ("cp1253", "Καλημέρα κόσμε, αυτό είναι ένα δοκιμαστικό κείμενο.\n"),
    ("cp1256", "مرحبا بالعالم، هذا نص للاختبار.\n"),
    ("cp932", "これは日本語のテキストです。文字コードの検出を試験します。\n"),
    ("gb2312", "这是一个中文文本，用于测试字符编码检测。\n"),
]


@pytest.mark.parametrize("language", sorted(WESTERN))
def test_western_text_from_a_windows_host_reads_right(language: str) -> None:
    text = WESTERN[language]
    data = text.encode("cp1252")
    assert data.decode(detect_charset(data)) == text
    # The same bytes as UTF-8 (the common case) are never taken for a code page.
    assert detect_charset(text.encode()) == "utf-8"


@pytest.mark.parametrize(("encoding", "text"), OTHERS)
def test_text_in_other_code_pages_keeps_the_detectors_pick(encoding: str, text: str) -> None:
    data = text.encode(encoding)
    assert data.decode(detect_charset(data)) == text


# Notes of a line or two, whose few accented letters the detector read as Big5, Big5-HKSCS
# or the Urdu code page 1006 ("F鄣re", "S緌 Paulo", "Hyvﻛﻛ") until 0.8.23.
SHORT_WESTERN = [
    "Fahrplan der Fähre\r\n\r\nAbfahrt um neun Uhr.\r\n",
    "Año nuevo\n",
    "Smörgåsbord\n",
    "Hyvää päivää\n",
    "Élan vital\n",
    "São Paulo\n",
    "Kaffee für zwei\n",
]
# Chinese, Japanese and Korean joined to Latin words, as product and tool names are, keep
# the detector's pick (each read right before 0.8.23, and three of them wrong in its first
# version of the rule above).
SHORT_CJK = [
    ("gb2312", "使用Python编写程序\n"),
    ("big5", "使用Python程式\n"),
    ("cp932", "Pythonの使い方\n"),
    ("cp932", "iPhoneを買いました。\n"),
    ("cp932", "Tシャツ\n"),
    ("cp932", "ABCテスト\n"),
    ("euc-kr", "Docker컨테이너\n"),
]


@pytest.mark.parametrize("text", SHORT_WESTERN)
def test_a_short_western_note_is_not_read_in_another_scripts_code_page(text: str) -> None:
    data = text.encode("cp1252")
    assert data.decode(detect_charset(data)) == text


@pytest.mark.parametrize(("encoding", "text"), SHORT_CJK)
def test_short_cjk_joined_to_latin_words_keeps_the_detectors_pick(encoding: str, text: str) -> None:
    data = text.encode(encoding)
    assert data.decode(detect_charset(data)) == text


def test_the_legacy_encoding_is_the_deployments_choice() -> None:
    lithuanian = "Ąžuolas, ėglė ir šermukšnis auga Lietuvoje.\n"
    data = lithuanian.encode("cp1257")
    assert data.decode(detect_charset(data)) != lithuanian  # Western by default
    assert data.decode(detect_charset(data, "windows-1257")) == lithuanian
    # Polish stays Polish with a Western default: it does not read as well as Windows-1250.
    polish = OTHERS[0][1].encode("cp1250")
    assert detect_charset(polish, "cp1252") == "cp1250"


TURKISH = "Türkçe metin: ğüşıöç ĞÜŞİÖÇ, İstanbul güzel bir şehir."


@pytest.mark.parametrize(
    "head",
    [
        '<meta http-equiv="Content-Type" content="text/html; charset=windows-1254">',
        "<meta charset='cp1254'>",
        '<?xml version="1.0" encoding="Windows-1254"?>',
    ],
)
def test_markup_is_read_in_the_encoding_it_declares(head: str) -> None:
    data = f"{head}<p>{TURKISH}</p>".encode("cp1254")
    assert detect_charset(data, markup=True) == "cp1254"
    assert data.decode(detect_charset(data)) != f"{head}<p>{TURKISH}</p>"  # the detector alone


def test_a_declaration_that_does_not_fit_the_bytes_is_passed_over() -> None:
    western = "<meta charset=utf-8><p>Crème brûlée — “vraiment”</p>".encode("cp1252")
    assert detect_charset(western, markup=True) == "cp1252"  # not UTF-8: the detector's turn
    latin = "<meta charset=iso-8859-1><p>Prix : 4 € “TTC”</p>".encode("cp1252")
    assert detect_charset(latin, markup=True) == "cp1252"  # as browsers read that label
    french = WESTERN["fr"]
    wide = f'<meta charset="utf-16"><p>{french}</p>'.encode("cp1252")
    assert detect_charset(wide, markup=True) == "cp1252"
    unknown = f'<meta charset="x-klingon"><p>{french}</p>'.encode("cp1252")
    assert detect_charset(unknown, markup=True) == "cp1252"


@pytest.mark.parametrize(
    "text",
    [
        "Hello world, plain text a Windows tool wrote.\n",
        "Grüße aus München, schöne Straße.\n",
        "Привет, мир! Это проверка кодировки текста.\n",
        "Καλημέρα κόσμε, αυτό είναι ένα δοκιμαστικό κείμενο.\n",
        "日本語のテキストです。文字コードの検出を試験します。\n",
    ],
)
@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_byte_order_mark_reads_right(text: str, codec: str) -> None:
    data = text.encode(codec)
    assert data.decode(detect_charset(data)) == text


def test_text_with_a_few_control_characters_is_not_taken_for_utf16() -> None:
    log = "\x1b[31mERROR\x1b[0m disk full on /var\n\x1b[33mWARN\x1b[0m retrying\n" * 20
    assert detect_charset(log.encode()) == "utf-8"


def test_utf8_with_a_few_bad_bytes_stays_utf8() -> None:
    text = "“Quoted” — naïve café text, with “curly quotes” everywhere. " * 10
    data = text.encode()
    # A file cut inside its last character, and one Windows-1252 byte pasted in: the rest
    # reads as UTF-8, not as mojibake of a legacy code page.
    cut = data + "”".encode()[:2]
    assert read_text(cut) == text + "\ufffd"
    head, rest = text[:25], text[25:]
    pasted = head.encode() + b"\xe9" + rest.encode()
    assert read_text(pasted) == head + "\ufffd" + rest
    # Text in a legacy code page has no well-formed UTF-8 to outweigh its bytes.
    for language in WESTERN:
        western = WESTERN[language].encode("cp1252")
        assert read_text(western) == WESTERN[language]
