"""nodes layer of cbcl_pr_ros."""
