"""Small widgets and the look every panel shares: plain-text labels (text from outside is never
HTML), elided labels, a wrapping flow layout, status icons and the stylesheet."""
