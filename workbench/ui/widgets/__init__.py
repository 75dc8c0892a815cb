"""Building blocks the views and panels share: the plot, its live helpers, the read-only
table, literal tooltips and the 'worked out while shown' mixin."""
