"""Where a document comes from (service.data.origin)."""

from __future__ import annotations

import pytest

from service.data.origin import doc_origin


@pytest.mark.parametrize(
    ("doc_id", "source", "origin"),
    [
        ("lo:text/swriter/guide/print_preview.html", "libreoffice-help", "LibreOffice Writer help"),
        ("lo:text/scalc/01/02010000.html", "libreoffice-help", "LibreOffice Calc help"),
        ("lo:text/shared/01/01130000.html", "libreoffice-help", "LibreOffice help"),
        ("man:ls.1", "manpage", "man page, section 1 (commands)"),
        ("man:ABORT.7", "manpage", "man page, section 7 (overviews)"),
        ("man:printf.3p", "manpage", "man page, section 3p (library functions)"),
        ("gnomehelp:gedit/gedit-open-files", "gnome-help", "GNOME help: gedit"),
        ("pydoc:library/os.html", "python-doc", "Python documentation"),
        ("handbook:apt", "debian-handbook", "Debian Administrator's Handbook"),
        ("d1", "wiki", "wiki"),  # another collection: its source as it is
        ("d2", "", ""),
    ],
)
def test_the_origin_names_the_manual(doc_id: str, source: str, origin: str) -> None:
    assert doc_origin(doc_id, source) == origin
