"""The Export panel (panel.ExportPanel): the export wizard, its queue and its widgets."""
