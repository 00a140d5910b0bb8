//! The instance's model list (`GET /v1/models`) and how the device names its models.
