"""Write a synthetic scene as a rosbag2 (MCAP or sqlite3) with ``rosbags``, no ROS installation needed.

Topics (message types from the ROS 2 Kilted type store, the distribution of this project's wheels):

- ``/camera/image_raw``: sensor_msgs/msg/Image, ``rgb8``; or, with ``compressed``,
  ``/camera/image_raw/compressed``: sensor_msgs/msg/CompressedImage, JPEG, format
  ``"rgb8; jpeg compressed bgr8"`` (image_transport's convention: decode with OpenCV, get BGR);
- ``/camera/camera_info``: sensor_msgs/msg/CameraInfo (plumb_bob, zero distortion), one per image;
- ``/odom``: nav_msgs/msg/Odometry of ``base_link`` in ``odom``, the camera's pose (the body frame sits at
  the camera's optical centre, REP-103 axes) and its body-frame twist.

Images and camera infos carry frame id ``camera_optical_frame`` (z forward, x right, y down, the usual
optical axes; it has the body's origin). Every message's bag time equals its header stamp. Nothing
depends on the wall clock, so the same messages give the same bytes: rosbags' MCAP and metadata.yaml
hold only message times, counts and the rosbags version.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import cv2
import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore
from rosbags.typesys.store import Typestore

from embodied_r_ros.frames import NS_PER_S, Pose

from .render import CameraModel

STORAGES = ("mcap", "sqlite3")
DEFAULT_START_S = 1_700_000_000  # 2023-11-14T22:13:20Z: a fixed, plausible epoch for the bag stamps
BAG_DIR = "bag"  # a scene's bag directory, beside its scene.json and questions.jsonl
IMAGE_TOPIC = "/camera/image_raw"
COMPRESSED_TOPIC = "/camera/image_raw/compressed"
INFO_TOPIC = "/camera/camera_info"
ODOM_TOPIC = "/odom"
CAMERA_FRAME = "camera_optical_frame"
ODOM_FRAME = "odom"
BODY_FRAME = "base_link"
JPEG_FORMAT = "rgb8; jpeg compressed bgr8"
TYPESTORE = Stores.ROS2_KILTED
# 6x6 row-major covariances: small and honest (the poses are exact, a consumer may still want non-zero).
_POSE_COVARIANCE = tuple(float(v) for v in np.diag([1e-4, 1e-4, 1e-4, 1e-5, 1e-5, 1e-5]).ravel())
_TWIST_COVARIANCE = tuple(float(v) for v in np.diag([1e-3, 1e-3, 1e-3, 1e-4, 1e-4, 1e-4]).ravel())


@dataclass(frozen=True)
class BagOptions:
    """How the bag is stored: ``storage`` "mcap" or "sqlite3", raw rgb8 or JPEG images."""

    storage: str = "mcap"
    compressed: bool = False
    jpeg_quality: int = 90

    def __post_init__(self) -> None:
        if self.storage not in STORAGES:
            raise ValueError(f"bag storage must be one of {STORAGES}, got {self.storage!r}")
        if not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f"JPEG quality must be in 1..100, got {self.jpeg_quality}")

    @property
    def image_topic(self) -> str:
        """The topic the images go to (raw or compressed)."""
        return COMPRESSED_TOPIC if self.compressed else IMAGE_TOPIC


def typestore() -> Typestore:
    """The rosbags type store the bags are written with (ROS 2 Kilted)."""
    return get_typestore(TYPESTORE)


class SceneBagWriter:
    """Writes frames, camera infos and odometry of one scene into a new bag directory (a context manager).

    ``path`` must not exist (rosbags never overwrites); the MCAP (or .db3) file inside is named after it.
    """

    def __init__(self, path: str | Path, camera: CameraModel, options: BagOptions | None = None) -> None:
        self.path = Path(path)
        self.camera = camera
        self.options = options or BagOptions()
        if self.path.exists():
            raise FileExistsError(
                f"bag {self.path} exists already; remove it or choose another output directory"
            )
        self._store = typestore()
        types = self._store.types
        self._Header = types["std_msgs/msg/Header"]
        self._Time = types["builtin_interfaces/msg/Time"]
        self._Image = types["sensor_msgs/msg/Image"]
        self._Compressed = types["sensor_msgs/msg/CompressedImage"]
        self._Info = types["sensor_msgs/msg/CameraInfo"]
        self._Roi = types["sensor_msgs/msg/RegionOfInterest"]
        self._Odometry = types["nav_msgs/msg/Odometry"]
        self._PoseCov = types["geometry_msgs/msg/PoseWithCovariance"]
        self._TwistCov = types["geometry_msgs/msg/TwistWithCovariance"]
        self._Pose = types["geometry_msgs/msg/Pose"]
        self._Point = types["geometry_msgs/msg/Point"]
        self._Quaternion = types["geometry_msgs/msg/Quaternion"]
        self._Twist = types["geometry_msgs/msg/Twist"]
        self._Vector3 = types["geometry_msgs/msg/Vector3"]
        plugin = StoragePlugin.MCAP if self.options.storage == "mcap" else StoragePlugin.SQLITE3
        self._writer = Writer(self.path, version=9, storage_plugin=plugin)
        self._writer.open()
        image_type = (self._Compressed if self.options.compressed else self._Image).__msgtype__
        self._image_conn = self._writer.add_connection(
            self.options.image_topic, image_type, typestore=self._store
        )
        self._info_conn = self._writer.add_connection(
            INFO_TOPIC, self._Info.__msgtype__, typestore=self._store
        )
        self._odom_conn = self._writer.add_connection(
            ODOM_TOPIC, self._Odometry.__msgtype__, typestore=self._store
        )
        self.messages = 0
        self.bytes = 0

    def __enter__(self) -> SceneBagWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self._writer.close()  # keep what was written readable; the caller reports the error

    def _header(self, stamp_ns: int, frame_id: str) -> object:
        return self._Header(
            stamp=self._Time(sec=stamp_ns // NS_PER_S, nanosec=stamp_ns % NS_PER_S), frame_id=frame_id
        )

    def _write(self, connection: object, stamp_ns: int, message: object) -> None:
        data = self._store.serialize_cdr(message, message.__msgtype__)
        self._writer.write(connection, stamp_ns, data)
        self.messages += 1
        self.bytes += len(data)

    def camera_info(self, stamp_ns: int) -> object:
        """The CameraInfo message of this camera at ``stamp_ns``."""
        cam = self.camera
        k = np.asarray(cam.k, dtype=np.float64)
        p = np.array([cam.fx, 0.0, cam.cx, 0.0, 0.0, cam.fy, cam.cy, 0.0, 0.0, 0.0, 1.0, 0.0])
        return self._Info(
            header=self._header(stamp_ns, CAMERA_FRAME),
            height=cam.height,
            width=cam.width,
            distortion_model="plumb_bob",
            d=np.zeros(5),
            k=k,
            r=np.eye(3).ravel(),
            p=p,
            binning_x=0,
            binning_y=0,
            roi=self._Roi(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False),
        )

    def write_frame(self, stamp_ns: int, image: np.ndarray) -> None:
        """Write one RGB image (HxWx3 uint8) and its CameraInfo at ``stamp_ns``."""
        if image.shape != (self.camera.height, self.camera.width, 3) or image.dtype != np.uint8:
            raise ValueError(
                f"image must be {self.camera.height}x{self.camera.width}x3 uint8, "
                f"got {image.shape} {image.dtype}"
            )
        self._write(self._info_conn, stamp_ns, self.camera_info(stamp_ns))
        header = self._header(stamp_ns, CAMERA_FRAME)
        if self.options.compressed:
            ok, jpeg = cv2.imencode(
                ".jpg",
                cv2.cvtColor(image, cv2.COLOR_RGB2BGR),
                [cv2.IMWRITE_JPEG_QUALITY, self.options.jpeg_quality],
            )
            if not ok:
                raise RuntimeError("OpenCV could not JPEG-encode the frame")
            message = self._Compressed(header=header, format=JPEG_FORMAT, data=jpeg.ravel())
        else:
            message = self._Image(
                header=header,
                height=image.shape[0],
                width=image.shape[1],
                encoding="rgb8",
                is_bigendian=0,
                step=image.shape[1] * 3,
                data=np.ascontiguousarray(image).ravel(),
            )
        self._write(self._image_conn, stamp_ns, message)

    def write_odometry(
        self,
        stamp_ns: int,
        pose: Pose,
        linear: tuple[float, float, float],
        angular: tuple[float, float, float],
    ) -> None:
        """One Odometry: ``pose`` in the odom frame, body-frame ``linear`` (m/s), ``angular`` (rad/s)."""
        qx, qy, qz, qw = pose.orientation
        message = self._Odometry(
            header=self._header(stamp_ns, ODOM_FRAME),
            child_frame_id=BODY_FRAME,
            pose=self._PoseCov(
                pose=self._Pose(
                    position=self._Point(x=pose.position[0], y=pose.position[1], z=pose.position[2]),
                    orientation=self._Quaternion(x=qx, y=qy, z=qz, w=qw),
                ),
                covariance=np.asarray(_POSE_COVARIANCE),
            ),
            twist=self._TwistCov(
                twist=self._Twist(
                    linear=self._Vector3(x=linear[0], y=linear[1], z=linear[2]),
                    angular=self._Vector3(x=angular[0], y=angular[1], z=angular[2]),
                ),
                covariance=np.asarray(_TWIST_COVARIANCE),
            ),
        )
        self._write(self._odom_conn, stamp_ns, message)

    def close(self) -> None:
        """Finish the bag (index, metadata.yaml)."""
        self._writer.close()
