"""Where a document comes from, in words a searcher recognises.

Result lists hold pages with the same title from different manuals ("Print Preview" in the
Writer and the Calc help, "Page Numbers" in two of them): the id tells them apart, but not to
a reader. The ids of the bundled collections say the source — LibreOffice help files by the
module folder (``lo:text/scalc/…``), man pages by their section (``man:ls.1``), GNOME help by
the application (``gnomehelp:gedit/…``) — and the document's ``source`` field names the rest.
"""

from __future__ import annotations

LIBREOFFICE_MODULES = {
    "swriter": "Writer",
    "scalc": "Calc",
    "simpress": "Impress",
    "sdraw": "Draw",
    "smath": "Math",
    "schart": "Chart",
    "sdatabase": "Base",
    "sbasic": "Basic",
}
MAN_SECTIONS = {
    "1": "commands",
    "2": "system calls",
    "3": "library functions",
    "4": "special files",
    "5": "file formats",
    "6": "games",
    "7": "overviews",
    "8": "administration",
}
SOURCES = {
    "libreoffice-help": "LibreOffice help",
    "manpage": "man page",
    "gnome-help": "GNOME help",
    "python-doc": "Python documentation",
    "debian-handbook": "Debian Administrator's Handbook",
}


def doc_origin(doc_id: str, source: str = "") -> str:
    """The manual a document belongs to: "LibreOffice Calc help", "man page, section 1
    (commands)", "GNOME help: gedit", "Python documentation"; the ``source`` as it is for
    other collections, "" when nothing says."""
    scheme, _, rest = doc_id.partition(":")
    if scheme == "lo" and rest.startswith("text/"):
        module = rest.split("/")[1] if rest.count("/") >= 1 else ""
        name = LIBREOFFICE_MODULES.get(module)
        return f"LibreOffice {name} help" if name else "LibreOffice help"
    if scheme == "man" and "." in rest:
        section = rest.rsplit(".", 1)[1]
        what = MAN_SECTIONS.get(section[:1])
        return f"man page, section {section}" + (f" ({what})" if what else "")
    if scheme == "gnomehelp" and "/" in rest:
        return f"GNOME help: {rest.split('/', 1)[0]}"
    return SOURCES.get(source, source)
