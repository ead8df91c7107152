"""Qt objects without widgets: threads and jobs that relay core/ work to the GUI as signals."""
