"""Path search in joint space: batched RRT-Connect (``rrt``), several goals in list order or by
shortest path (``goals``), and shortcutting of the found path (``smoothing``)."""
