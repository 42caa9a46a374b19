"""What the SQL backends share: the verbs written once (`verbs` and its parts), the
schema's migrations, the dialect object, and group commit."""
