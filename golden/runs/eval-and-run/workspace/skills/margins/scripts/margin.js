/** An order's margin: not for customer care. */
({ margin: 0.42 });
