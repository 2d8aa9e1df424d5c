"""core layer of cbcl_pr_ros."""
