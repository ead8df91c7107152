"""Where the user writes: the composer (message box, image attachments, Send/Stop), the editor
shared with a question's inline edit, the example chips of an empty chat and the context meter."""
