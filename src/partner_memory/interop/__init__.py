"""Moving memory: the reference runtime's on-disk state (design.md section 8), and copies."""

from partner_memory.interop.copy import CopyReport, copy_memory
from partner_memory.interop.partner_export import ExportReport, export_partner_state
from partner_memory.interop.partner_import import ImportReport, import_partner_state
from partner_memory.interop.partner_state import PartnerState, read_partner_state

__all__ = [
    "CopyReport",
    "ExportReport",
    "ImportReport",
    "PartnerState",
    "copy_memory",
    "export_partner_state",
    "import_partner_state",
    "read_partner_state",
]
